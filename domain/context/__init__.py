"""The context engine's policies: pure decisions about what a prompt may hold.

Each module is one layer of sections 3-6 of docs/context-management.md (which
the code cites as "SPEC 3.3" and the like), with no I/O: the one token
figure and the budgets the window gives (budget, calibration), the window guard
(3.1), the tool result guard (3.2), where a compaction may cut, its plan and the
plan that always fits, the summariser chain and summaries (3.3), and the
pruning planner (3.4). They take entries and numbers and return values that the
store can record as events and re-apply, so every view is reproducible.
"""
