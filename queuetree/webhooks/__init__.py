"""The admission webhook server: queue validation and mutation, gate injection."""
