//! The lexer: source text to tokens (LANGUAGE.md section 2).
//!
//! Newlines are tokens; the parser decides where they end statements (they
//! do not inside `( )` and `[ ]`). A number written directly before a name, as
//! in `16gh`, is one [`TokenKind::GroupedSize`] token. Characters that start no
//! token become E0101 diagnostics and are skipped, so lexing never fails.

use crate::diagnostics::{Code, Diagnostic, Span};

/// What a token is.
#[derive(Clone, Debug, PartialEq)]
pub enum TokenKind {
    Ident(String),
    Int(u64),
    Float(f64),
    Str(String),
    /// `16gh`: the grouped size `(gh 16)`.
    GroupedSize(u64, String),
    // keywords and constants
    Dim,
    Param,
    Def,
    Return,
    For,
    In,
    Yield,
    And,
    Or,
    As,
    Inf,
    True,
    False,
    // operators and punctuation
    Plus,
    Minus,
    Star,
    Slash,
    At,
    EqEq,
    NotEq,
    Lt,
    Le,
    Gt,
    Ge,
    Bang,
    Eq,
    Arrow,
    /// `...` in a pattern.
    Ellipsis,
    /// `..` in a loop's range.
    DotDot,
    Comma,
    Colon,
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    Newline,
    Eof,
}

impl TokenKind {
    /// How the token is shown in a syntax error.
    pub fn describe(&self) -> String {
        match self {
            TokenKind::Ident(s) => format!("name `{s}`"),
            TokenKind::Int(n) => format!("number `{n}`"),
            TokenKind::Float(x) => format!("number `{x}`"),
            TokenKind::Str(s) => format!("string {s:?}"),
            TokenKind::GroupedSize(n, s) => format!("grouped size `{n}{s}`"),
            TokenKind::Newline => "end of line".to_string(),
            TokenKind::Eof => "end of file".to_string(),
            other => format!("`{}`", other.text()),
        }
    }

    /// The fixed spelling of keywords and punctuation.
    fn text(&self) -> &'static str {
        match self {
            TokenKind::Dim => "dim",
            TokenKind::Param => "param",
            TokenKind::Def => "def",
            TokenKind::Return => "return",
            TokenKind::For => "for",
            TokenKind::In => "in",
            TokenKind::Yield => "yield",
            TokenKind::And => "and",
            TokenKind::Or => "or",
            TokenKind::As => "as",
            TokenKind::Inf => "inf",
            TokenKind::True => "true",
            TokenKind::False => "false",
            TokenKind::Plus => "+",
            TokenKind::Minus => "-",
            TokenKind::Star => "*",
            TokenKind::Slash => "/",
            TokenKind::At => "@",
            TokenKind::EqEq => "==",
            TokenKind::NotEq => "!=",
            TokenKind::Lt => "<",
            TokenKind::Le => "<=",
            TokenKind::Gt => ">",
            TokenKind::Ge => ">=",
            TokenKind::Bang => "!",
            TokenKind::Eq => "=",
            TokenKind::Arrow => "->",
            TokenKind::Ellipsis => "...",
            TokenKind::DotDot => "..",
            TokenKind::Comma => ",",
            TokenKind::Colon => ":",
            TokenKind::LParen => "(",
            TokenKind::RParen => ")",
            TokenKind::LBracket => "[",
            TokenKind::RBracket => "]",
            TokenKind::LBrace => "{",
            TokenKind::RBrace => "}",
            _ => "",
        }
    }
}

/// A token and where it is.
#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    pub kind: TokenKind,
    pub span: Span,
}

/// Splits `source` into tokens, ending with [`TokenKind::Eof`]; problems go to `diags`.
pub fn lex(source: &str, diags: &mut Vec<Diagnostic>) -> Vec<Token> {
    let bytes = source.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        let c = bytes[i];
        let kind = match c {
            b' ' | b'\t' | b'\r' => {
                i += 1;
                continue;
            }
            b'#' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'\n' => {
                i += 1;
                TokenKind::Newline
            }
            b'a'..=b'z' | b'A'..=b'Z' | b'_' => {
                i = ident_end(bytes, i);
                keyword_or_ident(&source[start..i])
            }
            _ if c.is_ascii_digit() || (c == b'.' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit)) => match lex_number(source, i) {
                Ok((kind, end)) => {
                    i = end;
                    kind
                }
                Err((end, message)) => {
                    i = end;
                    diags.push(Diagnostic::new(Code::E0101, Span::new(start, end), message));
                    continue;
                }
            },
            b'"' | b'\'' => {
                let quote = c;
                i += 1;
                while i < bytes.len() && bytes[i] != quote && bytes[i] != b'\n' {
                    i += 1;
                }
                if i < bytes.len() && bytes[i] == quote {
                    i += 1;
                    TokenKind::Str(source[start + 1..i - 1].to_string())
                } else {
                    diags.push(Diagnostic::new(Code::E0101, Span::new(start, i), "syntax error: unterminated string"));
                    continue;
                }
            }
            _ => {
                let two = bytes.get(i + 1).copied();
                let (kind, len) = match (c, two) {
                    (b'.', Some(b'.')) if bytes.get(i + 2) == Some(&b'.') => (TokenKind::Ellipsis, 3),
                    (b'.', Some(b'.')) => (TokenKind::DotDot, 2),
                    (b'-', Some(b'>')) => (TokenKind::Arrow, 2),
                    (b'=', Some(b'=')) => (TokenKind::EqEq, 2),
                    (b'!', Some(b'=')) => (TokenKind::NotEq, 2),
                    (b'<', Some(b'=')) => (TokenKind::Le, 2),
                    (b'>', Some(b'=')) => (TokenKind::Ge, 2),
                    (b'+', _) => (TokenKind::Plus, 1),
                    (b'-', _) => (TokenKind::Minus, 1),
                    (b'*', _) => (TokenKind::Star, 1),
                    (b'/', _) => (TokenKind::Slash, 1),
                    (b'@', _) => (TokenKind::At, 1),
                    (b'<', _) => (TokenKind::Lt, 1),
                    (b'>', _) => (TokenKind::Gt, 1),
                    (b'!', _) => (TokenKind::Bang, 1),
                    (b'=', _) => (TokenKind::Eq, 1),
                    (b',', _) => (TokenKind::Comma, 1),
                    (b':', _) => (TokenKind::Colon, 1),
                    (b'(', _) => (TokenKind::LParen, 1),
                    (b')', _) => (TokenKind::RParen, 1),
                    (b'[', _) => (TokenKind::LBracket, 1),
                    (b']', _) => (TokenKind::RBracket, 1),
                    (b'{', _) => (TokenKind::LBrace, 1),
                    (b'}', _) => (TokenKind::RBrace, 1),
                    _ => {
                        let ch = source[i..].chars().next().unwrap_or('\u{fffd}');
                        i += ch.len_utf8().max(1);
                        diags.push(Diagnostic::new(Code::E0101, Span::new(start, i), format!("syntax error: unexpected character {ch:?}")));
                        continue;
                    }
                };
                i += len;
                kind
            }
        };
        tokens.push(Token { kind, span: Span::new(start, i) });
    }
    tokens.push(Token { kind: TokenKind::Eof, span: Span::new(source.len(), source.len()) });
    tokens
}

fn ident_end(bytes: &[u8], mut i: usize) -> usize {
    while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
        i += 1;
    }
    i
}

fn keyword_or_ident(word: &str) -> TokenKind {
    match word {
        "dim" => TokenKind::Dim,
        "param" => TokenKind::Param,
        "def" => TokenKind::Def,
        "return" => TokenKind::Return,
        "for" => TokenKind::For,
        "in" => TokenKind::In,
        "yield" => TokenKind::Yield,
        "and" => TokenKind::And,
        "or" => TokenKind::Or,
        "as" => TokenKind::As,
        "inf" => TokenKind::Inf,
        "true" => TokenKind::True,
        "false" => TokenKind::False,
        _ => TokenKind::Ident(word.to_string()),
    }
}

/// Lexes a number starting at `i`: an integer, a float (`1.5`, `.5`, `1e-5`)
/// or a grouped size (`16gh`). Returns the token and where it ends.
fn lex_number(source: &str, start: usize) -> Result<(TokenKind, usize), (usize, String)> {
    let bytes = source.as_bytes();
    let digits = |mut i: usize| {
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        i
    };
    let mut i = digits(start);
    let mut is_float = false;
    if i < bytes.len() && bytes[i] == b'.' && !bytes.get(i + 1).is_some_and(|b| b.is_ascii_alphabetic() || *b == b'_' || *b == b'.') {
        is_float = true;
        i = digits(i + 1);
    }
    if i < bytes.len() && (bytes[i] == b'e' || bytes[i] == b'E') {
        let mut j = i + 1;
        if j < bytes.len() && (bytes[j] == b'+' || bytes[j] == b'-') {
            j += 1;
        }
        if j < bytes.len() && bytes[j].is_ascii_digit() {
            is_float = true;
            i = digits(j);
        }
    }
    let text = &source[start..i];
    if is_float {
        if i < bytes.len() && (bytes[i].is_ascii_alphabetic() || bytes[i] == b'_') {
            let end = ident_end(bytes, i);
            return Err((end, format!("syntax error: `{}` is not a number", &source[start..end])));
        }
        return text.parse::<f64>().map(|x| (TokenKind::Float(x), i)).map_err(|_| (i, format!("syntax error: `{text}` is not a number")));
    }
    let Ok(value) = text.parse::<u64>() else {
        return Err((i, format!("syntax error: the integer `{text}` is too large")));
    };
    if i < bytes.len() && (bytes[i].is_ascii_alphabetic() || bytes[i] == b'_') {
        let end = ident_end(bytes, i);
        let name = &source[i..end];
        return Ok((TokenKind::GroupedSize(value, name.to_string()), end));
    }
    Ok((TokenKind::Int(value), i))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<TokenKind> {
        let mut d = Vec::new();
        let t = lex(src, &mut d);
        assert!(d.is_empty(), "{d:?}");
        t.into_iter().map(|t| t.kind).collect()
    }

    #[test]
    fn grouped_sizes_and_floats() {
        assert_eq!(
            kinds("16gh 1e-5 .5 2.0 3"),
            vec![
                TokenKind::GroupedSize(16, "gh".into()),
                TokenKind::Float(1e-5),
                TokenKind::Float(0.5),
                TokenKind::Float(2.0),
                TokenKind::Int(3),
                TokenKind::Eof
            ]
        );
    }

    #[test]
    fn loop_ranges() {
        assert_eq!(
            kinds("for i in 0..L yield"),
            vec![
                TokenKind::For,
                TokenKind::Ident("i".into()),
                TokenKind::In,
                TokenKind::Int(0),
                TokenKind::DotDot,
                TokenKind::Ident("L".into()),
                TokenKind::Yield,
                TokenKind::Eof
            ]
        );
        assert_eq!(kinds("2..12"), vec![TokenKind::Int(2), TokenKind::DotDot, TokenKind::Int(12), TokenKind::Eof]);
    }

    #[test]
    fn operators() {
        assert_eq!(
            kinds("-> == != <= >= - !"),
            vec![TokenKind::Arrow, TokenKind::EqEq, TokenKind::NotEq, TokenKind::Le, TokenKind::Ge, TokenKind::Minus, TokenKind::Bang, TokenKind::Eof]
        );
    }

    #[test]
    fn bad_characters_are_reported_and_skipped() {
        let mut d = Vec::new();
        let t = lex("a $ b", &mut d);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].code, Code::E0101);
        assert_eq!(t.len(), 3);
    }
}
