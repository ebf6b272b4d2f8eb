"""evaluate.py's protocols that need a room of their own: fine-tuning (finetune, Sec. 5.1's recipe) and
the pooled features that retrieval, few-shot and the exported .npz share (features). They read the
data as data.py gives it, so they sit beside evaluate.py, above media/ and analysis/."""
