"""Probes of the kuberay domain: the manifest file named by the profile (``kuberay_manifest``)."""
