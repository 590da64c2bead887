"""Closed forms, ODEs and constructed weights, one module per chapter."""
