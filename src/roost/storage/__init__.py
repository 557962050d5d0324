"""A broker's storage: its log directories (`directories`), the partition logs in them
(`log_manager`: open, move, delete, retention and cleaning passes), the fsyncs batched off the event
loop (`flusher`) and the deletion of removed logs in the background (`log_deleter`). One
partition's log itself is roost.log; this room holds what a broker keeps of many."""
