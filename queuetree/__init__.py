"""queuetree: hierarchical queue admission for Kubernetes, compatible with Volcano's queue API.

Layers (enforced by import-linter, see pyproject.toml):

* ``queuetree.core``: pure scheduling library (resources, queue tree, sessions); no I/O.
* ``queuetree.api``: wire shapes (manifests, AdmissionReview, scheduler config) to core objects.
* ``queuetree.webhooks``: the aiohttp admission server.
* ``queuetree.operator``: the Kopf operator.
* ``queuetree.cli``: the ``queuetree`` command.
"""

__version__ = "0.1.0"

# Before anything imports kopf or kubernetes-asyncio: their generated client loads one class at
# a time instead of all at once (queuetree.importing).
from queuetree import importing as _importing

_importing.defer_generated_client()
_importing.defer_until_used()
