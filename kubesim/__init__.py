"""kubesim: a Kubernetes API server emulator for end-to-end tests and the local sandbox.

It knows nothing about queuetree (an import-linter contract says so).
"""
