"""The commands: one method per use case that changes a session, grouped by area.

Each command loads the Session aggregate through the write path, asks it to
decide (the domain refuses or records events) and answers what it decided.
"""
