"""Simulation of a resource group on a virtual clock, through the real planner: traces (parsed or
generated), the engine, and the figures that compare policies."""
