"""One module per `dsv3-preflight` subcommand (NAME, HELP, add_arguments, run). Keep imports light."""
