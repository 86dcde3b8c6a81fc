"""Tests; a package so that tests/passes does not shadow the top-level `passes`
package on sys.path (pytest inserts the rootdir of the first __init__-less
directory)."""
