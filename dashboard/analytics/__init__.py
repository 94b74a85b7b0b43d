"""Analytics pages: availability and leadership history computed by the Spark job (``workers.analytics``).

The web side only reads the result tables and enqueues runs by task name; it never imports
``workers`` (the Spark side loads the tables through ``workers.analytics.load``).
"""
