"""Wikipedia dumps -> the knowledge corpus and the pre-training sentences (`realm-bench blocks`).

Kept apart from the rest of the package because it needs the `beam` extra (Apache Beam,
mwparserfromhell, NLTK): nothing else imports it, so the default install stays without them.
"""
