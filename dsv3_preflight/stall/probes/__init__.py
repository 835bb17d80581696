"""The stall watch's probes, the only code of the domain that touches the system: /proc (procs), the capture on a
stall (capture: py-spy, Flight Recorder, NCCL RAS, NVML) and the rendezvous store (store). Plain data out."""
