"""Benchmarks of the session store: `make bench`, or `python -m tests.bench [--quick]`.

Not tests: nothing here is collected by pytest (no test_*.py files) and no
figure fails the build. Every figure is the median of repeated runs against a
real server process (``python -m services.grpc.server`` on a free loopback port,
stopped with SIGTERM), on PostgreSQL (a schema per run, dropped after) and on
SQLite (a temporary file). Every comparison is a ratio of figures measured in
the same run, and every target prints PASS or SHORT.

Groups (``--only NAME``, repeatable):

* ingest:  one-turn appends/s with 1, 8 and 32 clients (own sessions, and one
  shared session), next to single-row inserts straight into the database by
  as many clients, and to one client's empty gRPC call (a health check).
* length:  one-turn appends/s at entry 10, 1,000, 10,000 and 50,000 of a session.
* view:    prompt view latency, warm and cold (a fresh server's first view), for
  sessions of 1,000, 10,000 and 50,000 entries with compactions and prunes.
* replay:  prompt views at random past versions of a 10,000-event session.
* tokens:  in-process token counting at ingest: English, CJK, code.
* memory:  server RSS after 10,000 sessions of 200 entries, against the cache cap.
* peers:   turns/s at 1,000 turns against LangGraph's PostgresSaver and the
  OpenAI Agents SDK's SQLAlchemySession on the same PostgreSQL.
* coldwrite: the first append after a restart to a 10,000-entry session, next
  to a warm append.
* engine:  the context engine: a warm prompt view of 10,000 entries with the
  engine on, an offline Compact of ~200,000 tokens (2,500 entries), and appends while a
  summariser call (2 s, on a loopback provider) runs.

Modules: ``__main__`` (the command line), ``config`` (sizes, shared servers),
``server`` (the server process and throwaway databases), ``turns`` (what is
written), ``raw`` (the database's own limit), ``workloads`` (ingest, length),
``views`` (view, replay), ``coldwrite``, ``engine``, ``tokencount``,
``memory``, ``peers``, ``report`` (the table and JSON), ``plot`` (the PNG);
``profiling`` is a separate command that shows where the server's time goes.
"""
