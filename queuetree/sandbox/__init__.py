"""The local sandbox: kubesim, the webhook and the operator as processes on this machine.

``stack`` starts and stops them (one implementation, shared by ``queuetree sandbox`` and the
e2e suite); ``kubectl`` runs kubectl against any kubeconfig; ``scenarios`` reads and runs
scenario files; ``view`` renders the live queue tree. Nothing here imports kubesim: kubesim
runs in its own process (``queuetree sandbox --serve-kubesim``, started by ``stack``).
"""
