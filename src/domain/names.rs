//! Validated names and the folding that makes role names and emails unique
//! case-insensitively.

use unicode_normalization::UnicodeNormalization;

use crate::domain::error::ApiError;

/// Longest role name, in characters (CONTRACT §4).
pub const ROLE_NAME_MAX: usize = 64;
/// Longest role description, in characters.
pub const ROLE_DESCRIPTION_MAX: usize = 500;
/// Longest organization or user display name, in characters.
pub const DISPLAY_NAME_MAX: usize = 200;
/// Longest email address (RFC 5321 path limit).
pub const EMAIL_MAX: usize = 254;

/// The comparison key of a name: compatibility-normalized (so full-width and
/// ligature look-alikes collide) and case-folded, including `ß` → `ss`.
pub fn fold(text: &str) -> String {
    let normalized: String = text.nfkc().collect();
    normalized.to_uppercase().to_lowercase()
}

/// A role name: trimmed, 1..=64 characters, no control characters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoleName(String);

impl RoleName {
    /// Validates `raw` as the field `field`.
    pub fn parse(raw: &str) -> Result<Self, ApiError> {
        let trimmed = raw.trim();
        let length = trimmed.chars().count();
        if length == 0 {
            return Err(ApiError::invalid("name", "must not be empty"));
        }
        if length > ROLE_NAME_MAX {
            return Err(ApiError::invalid(
                "name",
                format!("must be at most {ROLE_NAME_MAX} characters"),
            ));
        }
        if trimmed.chars().any(char::is_control) {
            return Err(ApiError::invalid(
                "name",
                "must not contain control characters",
            ));
        }
        Ok(Self(trimmed.to_owned()))
    }

    /// The name as given (trimmed).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The uniqueness key.
    pub fn folded(&self) -> String {
        fold(&self.0)
    }

    /// Gives up the validated string.
    pub fn into_string(self) -> String {
        self.0
    }
}

/// Validates free text: at most `max` characters.
pub fn bounded_text(field: &str, raw: &str, max: usize) -> Result<String, ApiError> {
    if raw.chars().count() > max {
        return Err(ApiError::invalid(
            field,
            format!("must be at most {max} characters"),
        ));
    }
    Ok(raw.to_owned())
}

/// Validates a display name: trimmed, 1..=200 characters, no control characters.
pub fn display_name(field: &str, raw: &str) -> Result<String, ApiError> {
    let trimmed = raw.trim();
    let length = trimmed.chars().count();
    if length == 0 || length > DISPLAY_NAME_MAX {
        return Err(ApiError::invalid(
            field,
            format!("must be 1 to {DISPLAY_NAME_MAX} characters"),
        ));
    }
    if trimmed.chars().any(char::is_control) {
        return Err(ApiError::invalid(
            field,
            "must not contain control characters",
        ));
    }
    Ok(trimmed.to_owned())
}

/// Validates an email address loosely (one `@`, a dot-free-or-not domain,
/// no spaces or controls); delivery is not our concern, uniqueness is.
pub fn email(raw: &str) -> Result<String, ApiError> {
    let trimmed = raw.trim();
    let valid = trimmed.len() <= EMAIL_MAX
        && trimmed.split('@').count() == 2
        && trimmed.split('@').all(|part| !part.is_empty())
        && !trimmed.chars().any(|c| c.is_whitespace() || c.is_control());
    if !valid {
        return Err(ApiError::invalid(
            "email",
            "must be an email address like name@example.com",
        ));
    }
    Ok(trimmed.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folding_is_case_and_compatibility_insensitive() {
        assert_eq!(fold("ÄRZTE"), fold("ärzte"));
        assert_eq!(fold("A\u{308}rzte"), fold("ärzte"));
        assert_eq!(fold("Straße"), fold("STRASSE"));
        assert_eq!(fold("Ｏｗｎｅｒ"), fold("owner"));
        assert_eq!(fold("MEMBER"), fold("member"));
        assert_ne!(fold("admin"), fold("admins"));
    }

    #[test]
    fn role_names_are_trimmed_and_bounded() {
        assert_eq!(
            RoleName::parse("  Reviewer ")
                .map(RoleName::into_string)
                .ok(),
            Some("Reviewer".into())
        );
        assert!(RoleName::parse(&"x".repeat(64)).is_ok());
        assert!(RoleName::parse(&"é".repeat(64)).is_ok());
        assert!(RoleName::parse(&"x".repeat(65)).is_err());
        assert!(RoleName::parse("   ").is_err());
        assert!(RoleName::parse("a\u{7}b").is_err());
        assert!(RoleName::parse("line\nbreak").is_err());
    }

    #[test]
    fn emails() {
        assert!(email("a@b.c").is_ok());
        assert!(email("a@@b").is_err());
        assert!(email("no-at").is_err());
        assert!(email("a b@c").is_err());
        assert!(email("@b").is_err());
    }
}
