"""The local Kubernetes control plane both environments start: its processes, its PKI, the
state file every environment keeps and the kubeconfigs it hands out. Below ``sim`` and
``node``, which never import each other."""
