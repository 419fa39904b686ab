"""One interface to a model endpoint (router, sglang, local). Arrives with issue 3."""
