"""Input pipelines: seqio examples in, (retrieval-augmented) model batches out.

  base.py      the Pipeline contract and reading tasks
  batching.py  featurisation and the batch specs (keys, shapes, dtypes) of every model
  ict.py       inverse-cloze pairs cut from the corpus blocks (the retriever's warm start)
  realm.py     masked sentences + MIPS over a refreshed index (REALM pre-training)
  open_qa.py   questions + MIPS over an index built once (ORQA fine-tuning, evaluation)
"""
