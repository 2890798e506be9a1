"""Worker processes of the ledger's crash-safety and concurrency tests.

Each is a script run as ``sys.executable <file>``: it talks to the parent only through its
command line, stdin (a "go" line) and stdout (one flushed line per acknowledged event).
"""
