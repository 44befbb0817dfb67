"""The pure core: resource vectors, the queue tree and scheduling sessions.

Nothing here performs I/O, reads a clock, logs or imports a Kubernetes client; inputs are
immutable snapshot objects and outputs are decisions.
"""
