"""Bring in what users already have: other tools' operator logs as sleuth records folders."""
