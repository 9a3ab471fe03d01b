"""The session record as a run writes it, below the flow and above the models.

``events``: the progress events and the fields a runner writes as it goes;
``lifecycle``: claiming a session for a runner, and the one terminal writer
(``session_finish``: completed, failed with the safe answer, cancelled);
``record``: the self-evaluation's one writer and one reader, and the model usage.
The app's entry points (``diagnosis.services``, ``diagnosis.selectors``) expose them.
"""
