from bhtcli.cli.main import main

if __name__ == "__main__":   # guarded: Dask's worker processes re-import the main module
    main()
