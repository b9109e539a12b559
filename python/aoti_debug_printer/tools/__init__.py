"""The offline wing: what reads dumps after a run.

dumps (reading a dump's records and files), numerics (the bars values are
judged by), compare, report, repro and diverge (which runs its own compile:
its one way into the inductor wing). It stands on the package's records,
_options and _native."""
