"""The job's node code, shipped to every node as one bundle whose entry is ``job``: the node's host
(``host``) and each rank (``rank``); the timing harness (``harness``) and one module per phase
(``phases`` lists them); pure planning shared with the judge (``planning``).
"""
