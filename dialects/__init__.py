"""IR dialects of `lowering`, one file per level. Imports only xDSL."""
