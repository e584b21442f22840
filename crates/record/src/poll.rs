//! One poll of the live pipeline, written as the recording keeps it.

use gpulse_model::Poll;

use crate::{RecordError, Writer};

impl Writer {
    /// The GPUs' snapshot, the host and the watched tree of one poll.
    pub fn poll(&mut self, poll: &Poll) -> Result<(), RecordError> {
        if let Some(snap) = &poll.snapshot {
            self.snapshot(snap)?;
        }
        self.host(&poll.host)?;
        if let Some(t) = &poll.tree {
            self.tree(t)?;
        }
        Ok(())
    }
}
