"""What an operator sees of a running store: metrics, traces and structured logs.

Everything here observes from the outside: a layer of the gRPC server sees every call
and its answer, a listener sees every event the store saves, wrappers see
every summariser call and every engine decision, and a collector asks the
read models, caches and connection pool how they stand when Prometheus
scrapes. The use cases and the domain know nothing of it; the composition
root (services.bootstrap) wires it in, through services.observability.setup.
"""
