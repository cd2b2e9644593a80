"""One thin module per Lambda: parse the event, call the service, format the answer."""
