//! A data-only pickle decoder (protocols 2–5) for PyTorch memory snapshots.
//!
//! It understands the opcodes that build dicts, lists, tuples, strings, bytes, numbers, booleans
//! and None, and refuses every opcode that would name a class, call a function or build an object
//! (`GLOBAL`, `STACK_GLOBAL`, `REDUCE`, `BUILD`, `NEWOBJ`, `INST`, `OBJ`, `EXT*`, persistent ids):
//! a file that contains them is rejected, never executed.
//!
//! Hostile files are bounded: at most [`MAX_VALUES`] values are built (every value costs at least
//! one input byte, so memory is also bounded by the input's size), the stack and memo hold at
//! most [`MAX_STACK`] and [`MAX_MEMO`] entries, dict lookups by string key are hashed (a dict
//! shared by many entries costs nothing per entry), and dropping a value never recurses, so
//! nesting as deep as the input allows cannot overflow the thread's stack.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use thiserror::Error;

/// Most values one pickle may build (about 32 bytes each).
pub const MAX_VALUES: u64 = 1 << 24;
/// Most entries on the decoder's stack.
pub const MAX_STACK: usize = 1 << 22;
/// Most memo entries a pickle may define.
pub const MAX_MEMO: usize = 1 << 22;

/// A dict's entries in insertion order, with an index of its string keys.
#[derive(Default)]
pub struct PyDict {
    entries: Vec<(PyValue, PyValue)>,
    by_str: HashMap<Rc<str>, usize>,
}

impl PyDict {
    fn insert(&mut self, key: PyValue, value: PyValue) {
        if let PyValue::Str(s) = &key {
            if let Some(&i) = self.by_str.get(s) {
                // Python semantics: a repeated key keeps its place and takes the new value.
                self.entries[i].1 = value;
                return;
            }
            self.by_str.insert(s.clone(), self.entries.len());
        }
        self.entries.push((key, value));
    }

    /// Entries in insertion order.
    pub fn entries(&self) -> &[(PyValue, PyValue)] {
        &self.entries
    }
}

/// A decoded value. Containers are shared (`Rc`) because pickles memoize and refer back to them.
#[derive(Clone)]
pub enum PyValue {
    /// Python `None`.
    None,
    /// Python `True`/`False`.
    Bool(bool),
    /// An integer (LONG values beyond 128 bits are refused).
    Int(i128),
    /// A Python float.
    Float(f64),
    /// A Python `str`, shared when memoised.
    Str(Rc<str>),
    /// Python `bytes`, shared when memoised.
    Bytes(Rc<[u8]>),
    /// A Python list, shared and mutable as pickle's `APPENDS` requires.
    List(Rc<RefCell<Vec<PyValue>>>),
    /// A Python tuple, shared when memoised.
    Tuple(Rc<Vec<PyValue>>),
    /// A dict, in insertion order.
    Dict(Rc<RefCell<PyDict>>),
}

impl Drop for PyValue {
    // Iterative: children whose last owner this is are moved to a heap worklist, so a chain of
    // 200,000 nested tuples is freed without 200,000 nested calls.
    fn drop(&mut self) {
        let mut pending: Vec<PyValue> = Vec::new();
        take_children(self, &mut pending);
        while let Some(mut v) = pending.pop() {
            take_children(&mut v, &mut pending);
        }
    }
}

fn take_children(v: &mut PyValue, out: &mut Vec<PyValue>) {
    match v {
        PyValue::List(l) => {
            if let Some(cell) = Rc::get_mut(l) {
                out.append(cell.get_mut());
            }
        }
        PyValue::Tuple(t) => {
            if let Some(items) = Rc::get_mut(t) {
                out.append(items);
            }
        }
        PyValue::Dict(d) => {
            if let Some(cell) = Rc::get_mut(d) {
                let dict = cell.get_mut();
                dict.by_str.clear();
                for (k, v) in dict.entries.drain(..) {
                    out.push(k);
                    out.push(v);
                }
            }
        }
        _ => {}
    }
}

impl std::fmt::Debug for PyValue {
    // Shallow on purpose: a hostile pickle can build cycles.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PyValue::None => f.write_str("None"),
            PyValue::Bool(b) => write!(f, "{b}"),
            PyValue::Int(i) => write!(f, "{i}"),
            PyValue::Float(x) => write!(f, "{x}"),
            PyValue::Str(s) => write!(f, "{s:?}"),
            PyValue::Bytes(b) => write!(f, "bytes[{}]", b.len()),
            PyValue::List(l) => write!(f, "list[{}]", l.borrow().len()),
            PyValue::Tuple(t) => write!(f, "tuple[{}]", t.len()),
            PyValue::Dict(d) => write!(f, "dict[{}]", d.borrow().entries.len()),
        }
    }
}

impl PyValue {
    /// Looks a string key up in a dict (hashed).
    pub fn get(&self, key: &str) -> Option<PyValue> {
        match self {
            PyValue::Dict(d) => {
                let d = d.borrow();
                d.by_str.get(key).map(|&i| d.entries[i].1.clone())
            }
            _ => None,
        }
    }

    /// The number of elements of a list or tuple (without copying them).
    pub fn seq_len(&self) -> Option<usize> {
        match self {
            PyValue::List(l) => Some(l.borrow().len()),
            PyValue::Tuple(t) => Some(t.len()),
            _ => None,
        }
    }

    /// The elements of a list or tuple.
    pub fn items(&self) -> Option<Vec<PyValue>> {
        match self {
            PyValue::List(l) => Some(l.borrow().clone()),
            PyValue::Tuple(t) => Some(t.as_ref().clone()),
            _ => None,
        }
    }

    /// The value as an integer, if it is one (bools are not).
    pub fn as_int(&self) -> Option<i128> {
        match self {
            PyValue::Int(i) => Some(*i),
            PyValue::Bool(b) => Some(i128::from(*b)),
            _ => None,
        }
    }

    /// The value as a string, if it is a `str`.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            PyValue::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// Why a pickle was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PickleError {
    /// An opcode that would load a class or call code.
    #[error("refusing opcode {name} (0x{code:02x}) at byte {pos}: the file is not plain data")]
    Forbidden {
        /// Opcode name as Python's pickletools spells it.
        name: &'static str,
        /// Opcode byte.
        code: u8,
        /// Byte offset of the opcode in the file.
        pos: usize,
    },
    /// Bytes that are not a pickle gpumem understands.
    #[error("malformed pickle at byte {pos}: {why}")]
    Malformed {
        /// Byte offset where decoding stopped.
        pos: usize,
        /// What is wrong there.
        why: String,
    },
}

struct Decoder<'a> {
    data: &'a [u8],
    pos: usize,
    stack: Vec<PyValue>,
    marks: Vec<usize>,
    memo: Memo,
    values: u64,
}

/// The memo: pickles number entries 0, 1, 2, … (MEMOIZE always takes the next), so those live
/// in a vector at a few words each; only out-of-order `PUT` indices go to a map. A hash map
/// for all of them cost about 150 bytes per one-byte MEMOIZE.
#[derive(Default)]
struct Memo {
    dense: Vec<PyValue>,
    sparse: HashMap<u32, PyValue>,
}

impl Memo {
    fn len(&self) -> usize {
        self.dense.len() + self.sparse.len()
    }

    fn contains(&self, idx: u32) -> bool {
        (idx as usize) < self.dense.len() || self.sparse.contains_key(&idx)
    }

    fn get(&self, idx: u32) -> Option<&PyValue> {
        self.dense
            .get(idx as usize)
            .or_else(|| self.sparse.get(&idx))
    }

    fn insert(&mut self, idx: u32, v: PyValue) {
        let i = idx as usize;
        if i < self.dense.len() {
            self.dense[i] = v;
        } else if i == self.dense.len() {
            self.dense.push(v);
            // Entries stored ahead of time join the dense run once it reaches them.
            while let Some(next) = u32::try_from(self.dense.len())
                .ok()
                .and_then(|n| self.sparse.remove(&n))
            {
                self.dense.push(next);
            }
        } else {
            self.sparse.insert(idx, v);
        }
    }
}

/// Opcodes that execute or import: refused by name.
fn forbidden(op: u8) -> Option<&'static str> {
    Some(match op {
        b'c' => "GLOBAL",
        0x93 => "STACK_GLOBAL",
        b'R' => "REDUCE",
        b'b' => "BUILD",
        0x81 => "NEWOBJ",
        0x92 => "NEWOBJ_EX",
        b'i' => "INST",
        b'o' => "OBJ",
        0x82 => "EXT1",
        0x83 => "EXT2",
        0x84 => "EXT4",
        b'P' => "PERSID",
        b'Q' => "BINPERSID",
        0x97 => "NEXT_BUFFER",
        0x98 => "READONLY_BUFFER",
        _ => return None,
    })
}

impl<'a> Decoder<'a> {
    fn bad(&self, why: impl Into<String>) -> PickleError {
        PickleError::Malformed {
            pos: self.pos,
            why: why.into(),
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], PickleError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.data.len())
            .ok_or_else(|| self.bad(format!("needs {n} more bytes")))?;
        let slice = &self.data[self.pos..end];
        self.pos = end;
        Ok(slice)
    }

    fn u8(&mut self) -> Result<u8, PickleError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, PickleError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, PickleError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, PickleError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// Pushes a value, within the stack and value caps.
    fn push(&mut self, v: PyValue) -> Result<(), PickleError> {
        self.values += 1;
        if self.values > MAX_VALUES {
            return Err(self.bad(format!(
                "more than {MAX_VALUES} values: too large for a memory snapshot"
            )));
        }
        if self.stack.len() >= MAX_STACK {
            return Err(self.bad(format!("more than {MAX_STACK} values on the stack")));
        }
        self.stack.push(v);
        Ok(())
    }

    fn memoize(&mut self, idx: u32, v: PyValue) -> Result<(), PickleError> {
        if self.memo.len() >= MAX_MEMO && !self.memo.contains(idx) {
            return Err(self.bad(format!("more than {MAX_MEMO} memo entries")));
        }
        self.memo.insert(idx, v);
        Ok(())
    }

    fn pop(&mut self) -> Result<PyValue, PickleError> {
        self.stack.pop().ok_or_else(|| self.bad("stack underflow"))
    }

    fn pop_mark(&mut self) -> Result<Vec<PyValue>, PickleError> {
        let mark = self.marks.pop().ok_or_else(|| self.bad("no MARK"))?;
        if mark > self.stack.len() {
            return Err(self.bad("MARK above the stack"));
        }
        Ok(self.stack.split_off(mark))
    }

    fn top(&self) -> Result<&PyValue, PickleError> {
        self.stack.last().ok_or_else(|| self.bad("stack underflow"))
    }

    fn string(&mut self, n: usize) -> Result<PyValue, PickleError> {
        let bytes = self.take(n)?;
        let s = std::str::from_utf8(bytes).map_err(|_| self.bad("string is not UTF-8"))?;
        Ok(PyValue::Str(Rc::from(s)))
    }

    fn len64(&mut self) -> Result<usize, PickleError> {
        let n = self.u64()?;
        usize::try_from(n).map_err(|_| self.bad("length too large"))
    }

    fn run(&mut self) -> Result<PyValue, PickleError> {
        loop {
            let at = self.pos;
            let op = self.u8()?;
            if let Some(name) = forbidden(op) {
                return Err(PickleError::Forbidden {
                    name,
                    code: op,
                    pos: at,
                });
            }
            match op {
                0x80 => {
                    let proto = self.u8()?;
                    if !(2..=5).contains(&proto) {
                        return Err(self.bad(format!(
                            "pickle protocol {proto} is not supported (2 to 5 are)"
                        )));
                    }
                }
                0x95 => {
                    self.u64()?; // FRAME: a length hint only.
                }
                b'.' => return self.pop(),
                b'(' => {
                    if self.marks.len() >= MAX_STACK {
                        return Err(self.bad(format!("more than {MAX_STACK} open MARKs")));
                    }
                    self.marks.push(self.stack.len());
                }
                _ if self.literal(op)? => {}
                _ if self.memo_op(op)? => {}
                _ if self.stack_op(op)? => {}
                _ => self.build(op)?,
            }
        }
    }

    /// Pushes the value a literal opcode spells (an empty container, None, a bool, an
    /// integer, a float, a string, bytes); whether `op` was one.
    fn literal(&mut self, op: u8) -> Result<bool, PickleError> {
        match op {
            b'}' => self.push(PyValue::Dict(Rc::new(RefCell::new(PyDict::default()))))?,
            b']' => self.push(PyValue::List(Rc::new(RefCell::new(Vec::new()))))?,
            b')' => self.push(PyValue::Tuple(Rc::new(Vec::new())))?,
            b'N' => self.push(PyValue::None)?,
            0x88 => self.push(PyValue::Bool(true))?,
            0x89 => self.push(PyValue::Bool(false))?,
            b'J' => {
                let v = self.u32()? as i32;
                self.push(PyValue::Int(v.into()))?;
            }
            b'K' => {
                let v = self.u8()?;
                self.push(PyValue::Int(v.into()))?;
            }
            b'M' => {
                let v = self.u16()?;
                self.push(PyValue::Int(v.into()))?;
            }
            0x8a | 0x8b => {
                let n = if op == 0x8a {
                    self.u8()? as usize
                } else {
                    self.u32()? as usize
                };
                if n > 16 {
                    return Err(self.bad(format!("an integer of {n} bytes is too large")));
                }
                let bytes = self.take(n)?;
                let mut v: i128 = 0;
                for (i, b) in bytes.iter().enumerate() {
                    v |= i128::from(*b) << (8 * i);
                }
                if n > 0 && n < 16 && bytes[n - 1] & 0x80 != 0 {
                    v -= 1i128 << (8 * n);
                }
                self.push(PyValue::Int(v))?;
            }
            b'G' => {
                let b = self.take(8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                self.push(PyValue::Float(f64::from_be_bytes(a)))?;
            }
            0x8c => {
                let n = self.u8()? as usize;
                let s = self.string(n)?;
                self.push(s)?;
            }
            b'X' => {
                let n = self.u32()? as usize;
                let s = self.string(n)?;
                self.push(s)?;
            }
            0x8d => {
                let n = self.len64()?;
                let s = self.string(n)?;
                self.push(s)?;
            }
            b'C' | b'B' | 0x8e => {
                let n = match op {
                    b'C' => self.u8()? as usize,
                    b'B' => self.u32()? as usize,
                    _ => self.len64()?,
                };
                let b = self.take(n)?;
                self.push(PyValue::Bytes(Rc::from(b)))?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The memo: storing the top of the stack, or pushing a stored value; whether `op` was one.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "memo entries are bounded by the pickle's byte limit"
    )]
    fn memo_op(&mut self, op: u8) -> Result<bool, PickleError> {
        match op {
            0x94 => {
                let v = self.top()?.clone();
                let idx = self.memo.len() as u32;
                self.memoize(idx, v)?;
            }
            b'q' | b'r' => {
                let idx = if op == b'q' {
                    u32::from(self.u8()?)
                } else {
                    self.u32()?
                };
                let v = self.top()?.clone();
                self.memoize(idx, v)?;
            }
            b'h' | b'j' => {
                let idx = if op == b'h' {
                    u32::from(self.u8()?)
                } else {
                    self.u32()?
                };
                let v = self
                    .memo
                    .get(idx)
                    .cloned()
                    .ok_or_else(|| self.bad(format!("memo {idx} was never stored")))?;
                self.push(v)?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// POP, DUP and POP_MARK; whether `op` was one.
    fn stack_op(&mut self, op: u8) -> Result<bool, PickleError> {
        match op {
            b'0' => {
                self.pop()?;
            }
            b'2' => {
                let v = self.top()?.clone();
                self.push(v)?;
            }
            b'1' => {
                self.pop_mark()?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The builders: items set into a dict, appended to a list, or gathered into a tuple.
    fn build(&mut self, op: u8) -> Result<(), PickleError> {
        match op {
            b's' => {
                let value = self.pop()?;
                let key = self.pop()?;
                match self.top()? {
                    PyValue::Dict(d) => d.borrow_mut().insert(key, value),
                    _ => return Err(self.bad("SETITEM on a non-dict")),
                }
            }
            b'u' => {
                let items = self.pop_mark()?;
                if items.len() % 2 != 0 {
                    return Err(self.bad("SETITEMS with an odd number of items"));
                }
                match self.top()? {
                    PyValue::Dict(d) => {
                        let mut d = d.borrow_mut();
                        let mut it = items.into_iter();
                        while let (Some(k), Some(v)) = (it.next(), it.next()) {
                            d.insert(k, v);
                        }
                    }
                    _ => return Err(self.bad("SETITEMS on a non-dict")),
                }
            }
            b'a' => {
                let value = self.pop()?;
                match self.top()? {
                    PyValue::List(l) => l.borrow_mut().push(value),
                    _ => return Err(self.bad("APPEND on a non-list")),
                }
            }
            b'e' => {
                let items = self.pop_mark()?;
                match self.top()? {
                    PyValue::List(l) => l.borrow_mut().extend(items),
                    _ => return Err(self.bad("APPENDS on a non-list")),
                }
            }
            b't' => {
                let items = self.pop_mark()?;
                self.push(PyValue::Tuple(Rc::new(items)))?;
            }
            0x85..=0x87 => {
                let n = (op - 0x84) as usize;
                if self.stack.len() < n {
                    return Err(self.bad("stack underflow"));
                }
                let items = self.stack.split_off(self.stack.len() - n);
                self.push(PyValue::Tuple(Rc::new(items)))?;
            }
            other => return Err(self.bad(format!("unsupported opcode 0x{other:02x}"))),
        }
        Ok(())
    }
}

/// Decodes a pickle as plain data.
pub fn decode(data: &[u8]) -> Result<PyValue, PickleError> {
    Decoder {
        data,
        pos: 0,
        stack: Vec::new(),
        marks: Vec::new(),
        memo: Memo::default(),
        values: 0,
    }
    .run()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_python_pickle_protocol_4() {
        // pickle.dumps({'a': [1, 300, 70000, -2, 2**40], 'b': 'x', 'c': (True, None, 1.5)}, protocol=4)
        let data: &[u8] = b"\x80\x04\x95A\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x01a\x94]\x94(K\x01M,\x01J\x70\x11\x01\x00J\xfe\xff\xff\xff\x8a\x06\x00\x00\x00\x00\x00\x01e\x8c\x01b\x94\x8c\x01x\x94\x8c\x01c\x94\x88N\x47\x3f\xf8\x00\x00\x00\x00\x00\x00\x87\x94u.";
        let v = decode(data).unwrap();
        let a = v.get("a").unwrap().items().unwrap();
        let ints: Vec<i128> = a.iter().map(|x| x.as_int().unwrap()).collect();
        assert_eq!(ints, vec![1, 300, 70000, -2, 1 << 40]);
        assert_eq!(v.get("b").unwrap().as_str(), Some("x"));
        let c = v.get("c").unwrap().items().unwrap();
        assert!(matches!(c[0], PyValue::Bool(true)));
        assert!(matches!(c[2], PyValue::Float(f) if f == 1.5));
    }

    #[test]
    fn memo_entries_stored_out_of_order_are_found() {
        // PUT 2 'c', PUT 0 'a', then MEMOIZE 'b' takes index len(memo) = 2, replacing 'c';
        // GET 0 and GET 2 give ('a', 'b'), as Python's pickle.loads does.
        let data = b"\x80\x04\x8c\x01cq\x02\x8c\x01aq\x00\x8c\x01b\x94h\x00h\x02\x86.";
        let v = decode(data).unwrap();
        let items = v.items().unwrap();
        let got: Vec<&str> = items.iter().map(|x| x.as_str().unwrap()).collect();
        assert_eq!(got, ["a", "b"]);
    }

    #[test]
    fn refuses_code() {
        // pickle.dumps(os.system) style: GLOBAL 'os system'
        let data = b"\x80\x02cos\nsystem\nq\x00.";
        assert!(matches!(
            decode(data),
            Err(PickleError::Forbidden { name: "GLOBAL", .. })
        ));
        let data = b"\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x00\x8c\x02os\x8c\x06system\x93.";
        assert!(matches!(
            decode(data),
            Err(PickleError::Forbidden {
                name: "STACK_GLOBAL",
                ..
            })
        ));
        assert!(decode(b"").is_err());
        assert!(decode(b"\x80\x04}u.").is_err());
    }
}
