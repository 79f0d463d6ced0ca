//! TFRecord framing: each record is its length (u64, little-endian), the masked CRC-32C of
//! the length, the data, and the masked CRC-32C of the data.

/// TensorFlow's CRC mask: rotate right by 15 bits and add a constant, so that a CRC of data
/// that holds CRCs stays well distributed.
pub fn masked_crc(bytes: &[u8]) -> u32 {
    let crc = crc32c::crc32c(bytes);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// `data` framed as one record.
pub fn frame(data: &[u8]) -> Vec<u8> {
    let length = (data.len() as u64).to_le_bytes();
    let mut record = Vec::with_capacity(data.len() + 16);
    record.extend_from_slice(&length);
    record.extend_from_slice(&masked_crc(&length).to_le_bytes());
    record.extend_from_slice(data);
    record.extend_from_slice(&masked_crc(data).to_le_bytes());
    record
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The masked CRC-32C of known inputs: CRC-32C of "123456789" is 0xE3069283 (the
    /// standard check value), masked as TensorFlow does.
    #[test]
    fn masked_crc_of_the_check_string() {
        assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
        let expected = 0xE306_9283u32.rotate_right(15).wrapping_add(0xa282_ead8);
        assert_eq!(masked_crc(b"123456789"), expected);
    }

    #[test]
    fn a_frame_holds_length_crcs_and_data() {
        let record = frame(b"abc");
        assert_eq!(record.len(), 3 + 16);
        assert_eq!(&record[..8], &3u64.to_le_bytes());
        assert_eq!(&record[12..15], b"abc");
        assert_eq!(&record[15..], &masked_crc(b"abc").to_le_bytes());
    }
}
