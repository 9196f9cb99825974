"""bht sweep: driver, manifest, journal, worker task and the Dask engine."""
