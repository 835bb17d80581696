"""KubeRay manifests: the RayJob or RayCluster a Ray Train run is submitted with, read and judged before it runs.

``manifest`` turns the YAML into typed facts (with lines), ``entrypoint`` reads what the entrypoint and its
environment say about the run, and ``storage``, ``pods`` and ``job`` hold the rules the ``kuberay.*`` checks call.
"""
