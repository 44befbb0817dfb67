"""Views: what a person reads about queues, rendered with rich (``kubectl queuetree``, sandbox).

Pure renderers over parsed objects (``queuetree.api.listings``) and session results: no I/O,
no API client. ``trees`` draws the queue tree; ``reports`` the pending order, explanations
and what-if outcomes. The sandbox's live view and ``kubectl queuetree tree`` use the same
renderer, so what the sandbox shows is what a user sees on a cluster.
"""
