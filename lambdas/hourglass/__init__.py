"""Hourglass: a serverless delay queue. The Lambda asset root is `lambdas/`."""
