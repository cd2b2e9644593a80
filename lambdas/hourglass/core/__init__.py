"""Pure domain: no boto3, no environment, no clock (time is always a parameter)."""
