_backends = {}
