"""Released weights -> run folders (`realm-bench convert`).

A paper-scale run starts from BERT-base and from REALM's or ORQA's released retrievers and
readers, not from this project's own stages. This package reads those checkpoints (Hugging
Face `save_pretrained` folders, Google's TF1 BERT checkpoints, REALM/ORQA TF-Hub exports) and
writes a run folder that `--gin.WARM_START` / `--gin.BERT_RUN` accept like a trained run:

  hf_files     reading a Hugging Face folder: config.json, safetensors or pytorch_model.bin
  tf_files     reading a TF checkpoint, and renaming its variables to Hugging Face's names
  towers       finding the towers in a state dict (encoder, embedder, span reader) and
               mapping them onto this project's parameter tree, with the sizes they imply
  run_folder   writing checkpoints/, config.gin, record.json, vocab.txt and index/ at once
  convert      the keyword-only entry function behind the command
"""
