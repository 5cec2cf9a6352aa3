"""Distribution: parameter sweeps (:mod:`.sweep`) and running claims, mutants and sweep rows on a
Dask cluster (:mod:`.cluster`)."""
