"""The compile-time wing: what runs inside an Inductor compile.

install (the way into Inductor: its hooks, else wrapped methods), codegen
(our DebugPrinterManager and the calls it writes into each wrapper),
provenance (what each argument of a kernel holds) and filter (which
kernels get calls). It stands on the package's records and _native, and
imports nothing of the tools."""
