"""The operator: queue controller, admission cycle, gate removal and reclaim."""
