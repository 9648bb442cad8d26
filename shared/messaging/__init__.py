"""What travels between the services over Kafka: the message schemas and their one codec, the
messages' authenticators, topic names, Kafka clients and the batch sender."""
