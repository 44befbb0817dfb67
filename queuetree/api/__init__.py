"""Wire shapes: Kubernetes manifests, AdmissionReview bodies and scheduler configuration files."""
