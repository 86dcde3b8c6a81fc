"""Capture: numpy calls on proxy arrays become tensor-level IR."""
