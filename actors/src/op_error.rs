//! Why a mailbox operation was not applied, in the terms protocols answer
//! with. The shard actor classifies its storage error once, here; sessions
//! match on the kind (IMAP response codes, JMAP SetError types) instead of
//! searching the text. It crosses the mesh in `remote::Reply::Op`.

use meshmail_storage::StorageError;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum OpError {
    /// The name is taken (IMAP `ALREADYEXISTS`, JMAP `alreadyExists`).
    #[error("already exists: {0}")]
    AlreadyExists(String),
    /// The mailbox or message is not there (`NONEXISTENT`, `notFound`).
    #[error("not found: {0}")]
    NotFound(String),
    /// A rule of the model forbids it: INBOX cannot be deleted, a mailbox
    /// with children, a bad name (`CANNOT`, `forbidden`).
    #[error("{0}")]
    NotAllowed(String),
    /// The store or the shard's owner cannot serve right now: locked, down,
    /// too contended, moving between nodes (`UNAVAILABLE`, SMTP 451). Nothing
    /// was applied unless the text says to check.
    #[error("temporarily unavailable: {0}")]
    Unavailable(String),
    /// Anything else: a bug or a corrupt record (`SERVERBUG`, `serverFail`).
    #[error("{0}")]
    Failed(String),
}

impl From<StorageError> for OpError {
    fn from(e: StorageError) -> Self {
        match e {
            StorageError::AlreadyExists(what) => OpError::AlreadyExists(what),
            StorageError::NotFound(what) => OpError::NotFound(what),
            StorageError::Model(why) => OpError::NotAllowed(why),
            e if e.is_unavailable() => OpError::Unavailable(e.to_string()),
            e => OpError::Failed(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_errors_keep_their_kind() {
        assert!(matches!(
            OpError::from(StorageError::AlreadyExists("mailbox a".into())),
            OpError::AlreadyExists(_)
        ));
        assert!(matches!(OpError::from(StorageError::Conflict), OpError::Unavailable(_)));
        let fenced = StorageError::Fenced {
            shard: 3,
            detail: "x".into(),
        };
        assert!(matches!(OpError::from(fenced), OpError::Unavailable(_)));
        let exhausted = StorageError::RetriesExhausted {
            attempts: 2,
            elapsed_ms: 20_000,
            last: Box::new(StorageError::Unavailable("locked".into())),
        };
        assert!(matches!(OpError::from(exhausted), OpError::Unavailable(_)));
        assert!(matches!(
            OpError::from(StorageError::Corrupt {
                what: "m".into(),
                detail: "d".into()
            }),
            OpError::Failed(_)
        ));
    }
}
