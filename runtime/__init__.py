"""Runs compiled artifacts and checks guards. Imports neither `passes` nor `lowering`."""
