from samebits_app.cli import entry

entry()
