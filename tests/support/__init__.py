"""Test doubles that speak real protocols over loopback."""
