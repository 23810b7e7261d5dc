"""Tests of the context engine."""
